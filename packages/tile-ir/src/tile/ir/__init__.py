"""tile.ir"""
