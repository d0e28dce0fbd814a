"""The engine tests need no database and no Django; they only import scheduling.engine."""
