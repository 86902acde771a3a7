# The build is driven by pbr through pyproject.toml; setuptools still needs
# this shim to hand over to pbr (as in every OpenStack project).
import setuptools

setuptools.setup(
    setup_requires=['pbr>=6.0.0'],
    pbr=True,
    # The agent's hot procfs reader in C (vsmtio_agent/linux/procfs.py says
    # why). Optional: without a compiler or Python's headers the install
    # goes on and the agent reads procfs in pure Python, as it says at start.
    ext_modules=[setuptools.Extension(
        'vsmtio_agent.linux._procread',
        sources=['vsmtio_agent/linux/_procread.c'],
        extra_compile_args=['-Wall', '-Wextra', '-Werror=implicit'],
        optional=True)])
