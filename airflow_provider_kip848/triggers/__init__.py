"""Triggers: broker polling that runs in the triggerer, holding no worker slot."""
