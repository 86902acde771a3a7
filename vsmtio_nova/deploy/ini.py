"""A line-preserving editor for the INI files oslo.config reads.

configparser cannot edit nova.conf: it drops comments and keeps one value
of a repeated key, and ``[filter_scheduler] available_filters`` is a
MultiStrOpt written as a repeated key. This reads a file the way
``oslo_config.iniparser.BaseParser`` does (sections, ``key = value`` or
``key: value``, indented continuation lines, ``#``/``;`` comments, a
blank line ending a value), so that every edit lands where oslo.config
will see it, and it changes only the lines it is asked to: every other
byte of the file stays as it was.
"""

import os
import tempfile


class Error(ValueError):
    """A file that oslo.config would not parse, or an edit not possible."""


def normalize(section):
    """Section names as oslo.config matches them (``DEFAULT`` is exact)."""
    return section if section == 'DEFAULT' else section.lower()


def split_eol(raw):
    """``(content, line_ending)`` of one line as read with its ending."""
    content = raw.rstrip('\r\n')
    return content, raw[len(content):]


def split_list(value):
    """The items of a ListOpt value, as oslo.config's List type splits."""
    return [item.strip() for item in value.split(',') if item.strip()]


class Unit:
    """One assignment: its key line and any continuation lines."""

    def __init__(self, start, section, key, value):
        self.start = start
        self.end = start + 1
        self.section = section
        self.key = key
        self.values = [value]
        self.quoted = False

    @property
    def value(self):
        return '\n'.join(self.values)


def _split_key_value(line):
    """Mirrors ``BaseParser._split_key_value``; ``None`` if no assignment."""
    colon, equal = line.find(':'), line.find('=')
    if colon < 0 and equal < 0:
        return None
    cut = equal if colon < 0 or 0 <= equal < colon else colon
    key, value = line[:cut].strip(), line[cut + 1:].strip()
    quoted = (len(value) > 1 and value[0] == value[-1]
              and value.startswith(('"', "'")))
    return key, (value[1:-1] if quoted else value), quoted


class Document:
    """The lines of one INI file, re-scanned after every edit."""

    def __init__(self, text, name='<string>'):
        self.name = name
        self.lines = text.splitlines(keepends=True)
        first = self.lines[0] if self.lines else '\n'
        self.eol = '\r\n' if first.endswith('\r\n') else '\n'
        self.scan()

    @classmethod
    def read(cls, path):
        with open(path, encoding='utf-8', newline='') as f:
            return cls(f.read(), path)

    def text(self):
        return ''.join(self.lines)

    def _error(self, index, why):
        raise Error('%s:%d: %s: %r' % (self.name, index + 1, why,
                                       self.lines[index].rstrip('\r\n')))

    def scan(self):
        """Find headers and assignments, refusing what oslo would refuse."""
        self.headers, self.units = [], []
        section = unit = None
        for i, raw in enumerate(self.lines):
            line = raw.rstrip()
            if not line:
                unit = None
            elif line.startswith((' ', '\t')):
                if unit is None:
                    self._error(i, 'unexpected continuation line')
                unit.end = i + 1
                unit.values.append(line.lstrip())
            elif line.startswith('['):
                unit = None
                if not line.endswith(']') or len(line) <= 2:
                    self._error(i, 'invalid section header')
                section = normalize(line[1:-1])
                self.headers.append((i, section))
            elif line.startswith(('#', ';')):
                unit = None
            else:
                parsed = _split_key_value(line)
                if parsed is None or not parsed[0]:
                    self._error(i, 'not a "key = value" line')
                if section is None:
                    self._error(i, 'assignment before any section')
                unit = Unit(i, section, parsed[0], parsed[1])
                unit.quoted = parsed[2]
                self.units.append(unit)

    def find(self, section, key):
        """Every assignment of ``key`` in ``section``, in file order."""
        section = normalize(section)
        return [u for u in self.units
                if u.section == section and u.key == key]

    def unit_at(self, index):
        return next((u for u in self.units if u.start == index), None)

    def header_at(self, index):
        return next((s for i, s in self.headers if i == index), None)

    def section_end(self, header):
        """Index after the last line of the section starting at header."""
        later = [i for i, _s in self.headers if i > header]
        return later[0] if later else len(self.lines)

    def insertion_point(self, section):
        """Where a new key of ``section`` goes; ``None`` if it is absent.

        After the last assignment of the section's last occurrence (where
        oslo.config reads last), or right under its header.
        """
        section = normalize(section)
        starts = [i for i, s in self.headers if s == section]
        if not starts:
            return None
        end = self.section_end(starts[-1])
        inside = [u.end for u in self.units if starts[-1] < u.start < end]
        return inside[-1] if inside else starts[-1] + 1

    def line(self, key, value):
        return '%s = %s%s' % (key, value, self.eol)

    def insert(self, index, lines):
        """Insert whole lines; True if the line before had to be ended."""
        ended = False
        if index > 0 and not self.lines[index - 1].endswith('\n'):
            self.lines[index - 1] += self.eol
            ended = True
        self.lines[index:index] = lines
        self.scan()
        return ended

    def replace(self, start, end, lines):
        self.lines[start:end] = lines
        self.scan()

    def set_last_line(self, unit, content):
        """Rewrite the content of a unit's last line, keeping its ending."""
        _old, ending = split_eol(self.lines[unit.end - 1])
        self.replace(unit.end - 1, unit.end, [content + ending])


def write_atomic(path, text):
    """Replace ``path`` with ``text``, keeping its mode and owner."""
    st = os.stat(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                               prefix='.%s.' % os.path.basename(path))
    try:
        with os.fdopen(fd, 'w', encoding='utf-8', newline='') as f:
            f.write(text)
        os.chmod(tmp, st.st_mode & 0o7777)
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except PermissionError:
            pass  # not root: the file stays ours, as it was
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
