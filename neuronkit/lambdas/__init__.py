"""Code that runs in AWS Lambda functions the constructs deploy (each folder is one function asset)."""
