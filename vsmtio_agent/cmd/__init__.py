"""The console commands (``vsmtio-agent``, ``vsmtio-sim``).

Options are declared once, as oslo.config options; where a command also
takes them after its sub-command, :func:`add_argument` puts the same
option on that sub-command's parser, with the option's own type, bounds,
choices and help.
"""

import argparse

from oslo_config import cfg


def _converter(opt):
    def convert(text):
        try:
            return opt.type(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc))
    convert.__name__ = opt.dest
    return convert


def add_argument(parser, opt, **kwargs):
    """Add the oslo.config option ``opt`` to an argparse ``parser``."""
    if isinstance(opt, cfg.BoolOpt):
        kwargs.setdefault('action', 'store_true')
    else:
        kwargs.setdefault('type', _converter(opt))
    kwargs.setdefault('dest', opt.dest)
    kwargs.setdefault('help', opt.help)
    parser.add_argument('--' + opt.name, **kwargs)
