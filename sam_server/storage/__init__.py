"""Stored project files and data sets."""
