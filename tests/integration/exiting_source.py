"""A source whose module calls sys.exit() on import: a job's code that would
end the process running it. Loaded by the worker by dotted path."""

import sys

sys.exit("exiting_source refuses to load")
