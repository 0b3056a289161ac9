"""The streaming job on the driver: its options and errors, one batch source per kind of input (tables resolved and
planned, one encode pass built per micro-batch), and the checkpoint's files checked before a run."""
