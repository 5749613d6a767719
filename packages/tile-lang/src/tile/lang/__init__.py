"""tile.lang"""
