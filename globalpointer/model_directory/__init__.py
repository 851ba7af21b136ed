"""The model directory, the contract between commands: its layout (every file name and how it is
checked), opening, writing, and the cache of programs compiled from checkpoints, each in its module."""
