"""tile.ops"""
