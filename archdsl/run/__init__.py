"""Running models: training (recipes from timm parts), checkpoints, data loaders, evaluation, devices.

Knows the compiler (`archdsl.nn`) and the data layer; knows nothing of the command line.
"""
