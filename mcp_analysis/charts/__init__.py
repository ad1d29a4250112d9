"""Charts from Vega-Lite specs: validated on the server, rendered in a child process.

Contract: `validate_spec` accepts only Vega-Lite with inline data (no `url` or `href`
anywhere, no data generators, allowed marks and channels, bounded rows, strings,
depth and views) and refuses everything else with a `ChartError` naming the path and
what to do, in time proportional to the size it allows. `ChartRenderer.render` turns
a validated spec into an SVG and a palette PNG with vl-convert in a separate process
that starts on the first chart, exits when idle, and is killed when a render exceeds
its time; the server process never loads the renderer.
"""
