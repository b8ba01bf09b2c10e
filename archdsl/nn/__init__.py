"""IR -> nn.Module: the compiler (`build`), exact parameter/FLOP counts (`summary`) and the blocks.

Knows the IR and torch/timm; knows nothing of training, data or the command line.
"""
