"""(room docstring to write)"""
