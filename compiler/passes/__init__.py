"""Compiler passes over SAM-IR: fusion into kernels, cost, memory planning, sizing, placement."""
