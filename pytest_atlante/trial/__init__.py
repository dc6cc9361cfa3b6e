"""One trial, end to end, without pytest: the runner, the budget it meters, the transcript it
captures, and the scripted model server with its wire dialects."""
