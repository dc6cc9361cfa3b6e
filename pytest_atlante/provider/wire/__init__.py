"""The wire formats of the model APIs the hosts speak, one module each."""
