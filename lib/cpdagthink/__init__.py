"""cpdagthink."""
