"""The model side of a trial: the scripted model, the metering proxy and its meter, and the wire formats they speak."""
