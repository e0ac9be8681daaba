"""Node group size Lambda function (handler.py is the function asset): the desired size of an autoscaled node group."""
