# The build is driven by pbr through pyproject.toml; setuptools still needs
# this shim to hand over to pbr (as in every OpenStack project).
import setuptools

setuptools.setup(
    setup_requires=['pbr>=6.0.0'],
    pbr=True)
