"""tile.backends.cuda"""
