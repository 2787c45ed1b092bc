"""A flow's versions: what it said at each save that changed it (services: made only inside the
one save path), two of them compared (diffs), the page and the API that list and compare them."""
