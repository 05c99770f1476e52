"""The bottom layer every other package may import: chat rendering and message helpers.

Nothing is imported here at package import time; import the submodules you need.
"""
