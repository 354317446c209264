"""Accuracy evals against a running deployment (`pdctl eval ...`). Each eval is one subpackage."""
