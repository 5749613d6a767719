"""tile.conformance"""
