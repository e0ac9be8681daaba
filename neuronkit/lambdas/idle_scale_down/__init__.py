"""Idle scale-down Lambda function (handler.py is the function asset)."""
