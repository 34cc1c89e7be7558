"""The bottom room: where things are, what they are called, what time it is, and the one
family of errors a user can cause (``errors.LakehouseError``)."""
