"""tile.backends.rocm"""
