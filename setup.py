import setuptools

# pbr reads everything from setup.cfg; pip needs this file for pbr to run.
setuptools.setup(pbr=True)
