"""tile.backends.cpu"""
