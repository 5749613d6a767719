"""tile.layout"""
