"""Analysis of trained candidates (imported as `archdsl.analysis`).

One module per measurement, each a pure function of model + data + options returning a
frozen pydantic result: `metrics` (top-1, NLL, ECE), `robustness` (corrupted sets),
`hessian` (max-eigenvalue spectrum: NEP, APE), `fourier` (Delta log amplitude and variance
per block); `plots` draws them and `report` gathers them into JSON and Markdown.
Nothing is imported here, so `import archdsl.analysis.metrics` does not pull in matplotlib.
"""
