"""A flow's versions: what it said at each save that changed it (services, made only inside the
one save path), the page and the API that list them and diff two."""
