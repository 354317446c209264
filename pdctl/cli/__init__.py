"""Command-line layer: modules here parse options and render results; the work lives elsewhere."""
