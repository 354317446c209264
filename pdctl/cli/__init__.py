"""Command-line layer: modules here parse options and print results; the work lives elsewhere."""
