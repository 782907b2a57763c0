"""Hot statements compiled once, run many times with new parameters.

The ORM builds and compiles a query's SQL on every call: for the dozen statements of an
agent turn that is most of the turn's CPU (a single-row ``filter(pk=…).update(…)`` costs
~10x its execution on SQLite). A ``Prepared`` statement is still written with the ORM,
with ``P(name)`` where a value changes from call to call. Its SQL is compiled the first
time it runs on a database alias and kept for the process (every thread's connection to
that database runs the same SQL); each call binds the values, runs the SQL through the
connection's cursor (so query logging, ``CaptureQueriesContext`` and error wrapping are
Django's own) and turns rows into model instances or value tuples as the ORM would::

    RUN_BY_KEY = Prepared(lambda: AgentRun.objects.filter(pk=P("pk"))[:1])
    run = RUN_BY_KEY.first(pk=7)

A ``P`` compiles to one ``%s``; its value is prepared for the database by ``field`` when
one is given (a UUID, a date, JSON), else passed as it is (keys, strings, numbers).
``update_rows`` is a conditional UPDATE compiled per shape, ``insert`` an INSERT per
model and row count.

SELECTs yield model instances (with ``select_related`` and annotations) or
``values_list`` rows (anything else is refused when compiled); a ``select_for_update``
is compiled inside the caller's transaction, and every later call must be in one too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Expression, F, Field, Model, QuerySet
from django.db.models.constants import OnConflict
from django.db.models.query import FlatValuesListIterable, ModelIterable, ValuesListIterable, get_related_populators
from django.db.models.sql.subqueries import UpdateQuery


class P(Expression):
    """A parameter of a prepared statement: ``%s`` in its SQL, bound on each call."""

    def __init__(self, name: str, field: Field | None = None, *, save: bool = False):
        super().__init__(output_field=field)
        self.name, self.target, self.for_save = name, field, save

    def as_sql(self, compiler, connection):
        return "%s", [self]

    def bind(self, value: Any, connection) -> Any:
        if self.target is None or isinstance(value, Expression):
            return value
        if self.for_save:
            return self.target.get_db_prep_save(value, connection)
        return self.target.get_db_prep_value(value, connection, prepared=False)

    def __repr__(self) -> str:
        return f"P({self.name!r})"


class _Compiled:
    """One statement's SQL for one database, and how to bind and read it."""

    __slots__ = ("sql", "params", "slots", "read")

    def __init__(self, sql: str, params: tuple, read: Callable | None):
        self.sql = sql
        self.params = list(params)
        self.slots = [(i, p) for i, p in enumerate(self.params) if isinstance(p, P)]
        self.read = read

    def bound(self, values: dict, connection) -> list:
        params = self.params.copy()
        for i, slot in self.slots:
            try:
                value = values[slot.name]
            except KeyError:
                raise TypeError(f"prepared statement needs a value for {slot.name!r}") from None
            params[i] = slot.bind(value, connection)
        return params


# (statement, alias, shape) -> its SQL for the alias' database: one per process, shared by
# threads (the SQL and the fields' converters depend on the database, not on the connection).
_COMPILED: dict[tuple, _Compiled] = {}


class Prepared:
    """A SELECT (``build()`` returns the queryset) or, with ``Prepared.update``, an UPDATE."""

    def __init__(self, build: Callable[..., QuerySet], *, values: Callable[..., dict] | None = None):
        self._build = build
        self._values = values
        self._key = object()

    @classmethod
    def update(cls, build: Callable[..., QuerySet], values: Callable[..., dict]) -> Prepared:
        """``build()``'s rows updated with ``values()`` (field name → ``P`` or expression);
        with a ``shape``, both are called with it."""
        return cls(build, values=values)

    # ------------------------------------------------------------------ calls

    def all(self, *, using: str = DEFAULT_DB_ALIAS, shape: Any = None, **values) -> list:
        """Every row: model instances, or tuples (values) for a ``values_list``."""
        compiled, connection = self._compiled(using, shape)
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, compiled.bound(values, connection))
            rows = cursor.fetchall()
        return compiled.read(rows, using) if rows else []

    def first(self, *, using: str = DEFAULT_DB_ALIAS, shape: Any = None, **values):
        """The first row, or None (the query itself says ``[:1]`` and its order)."""
        rows = self.all(using=using, shape=shape, **values)
        return rows[0] if rows else None

    def run(self, *, using: str = DEFAULT_DB_ALIAS, shape: Any = None, **values) -> int:
        """An UPDATE: the number of rows it changed."""
        compiled, connection = self._compiled(using, shape)
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, compiled.bound(values, connection))
            return cursor.rowcount

    # ------------------------------------------------------------------ compiling

    def _compiled(self, using: str, shape: Any) -> tuple[_Compiled, Any]:
        key = (self._key, using, shape)
        compiled = _COMPILED.get(key)
        if compiled is None:
            compiled = _COMPILED[key] = self._compile(using, shape)  # two threads at once: the same SQL, twice
        return compiled, connections[using]

    def _compile(self, using: str, shape: Any) -> _Compiled:
        args = () if shape is None else (shape,)  # a statement of shapes builds each with its key
        queryset = self._build(*args)
        if self._values is not None:
            query = queryset.query.chain(UpdateQuery)
            query.add_update_values(self._values(*args))
            sql, params = query.get_compiler(using).as_sql()
            return _Compiled(sql, params, None)
        compiler = queryset.query.get_compiler(using)
        sql, params = compiler.as_sql()
        return _Compiled(sql, params, _reader(queryset, compiler))


def _reader(queryset: QuerySet, compiler) -> Callable[[list, str], list]:
    """How rows of ``compiler``'s SELECT become what ``queryset`` would have yielded."""
    fields = [s[0] for s in compiler.select[0 : compiler.col_count]]
    converters = compiler.get_converters(fields)

    def converted(rows):
        return list(compiler.apply_converters(rows, converters)) if converters else rows

    kind = queryset._iterable_class
    if kind is ModelIterable:
        klass_info, select, annotations = compiler.klass_info, compiler.select, compiler.annotation_col_map
        model = klass_info["model"]
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        names = [f[0].target.attname for f in select[start:end]]
        has_related = bool(klass_info.get("related_klass_infos"))

        populators_of: dict[str, list] = {}

        def read(rows, using):
            populators = populators_of.get(using)
            if populators is None:
                populators = populators_of[using] = get_related_populators(klass_info, select, using) if has_related else []
            out = []
            for row in converted(rows):
                obj = model.from_db(using, names, row[start:end])
                for populator in populators:
                    populator.populate(row, obj)
                for name, pos in annotations.items():
                    setattr(obj, name, row[pos])
                out.append(obj)
            return out

        return read
    if kind in (ValuesListIterable, FlatValuesListIterable):  # the SELECT lists the columns in the order asked for
        flat = kind is FlatValuesListIterable

        def read(rows, using):
            return [row[0] for row in converted(rows)] if flat else [tuple(row) for row in converted(rows)]

        return read
    raise TypeError(f"a prepared SELECT yields model instances or values_list rows, not {kind.__name__}")


# --------------------------------------------------------------------------- single-row updates


class Increment:
    """A value ``update_rows`` adds to the column instead of writing it (``col = col + n``)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"Increment({self.value!r})"


def update_rows(model: type[Model], filters: dict, values: dict, *, using: str = DEFAULT_DB_ALIAS) -> int:
    """``model.objects.filter(**filters).update(**values)`` as a prepared statement: one
    compiled SQL per shape (the model, the filters' lookups, the values' names and which of
    them are ``Increment``s). A tuple in ``filters`` (an ``__in`` list) and a None (``IS
    NULL``) are part of the shape; every other filter and value is bound."""
    for lookup, value in filters.items():
        if isinstance(value, (list, set, frozenset)):
            raise TypeError(f"update_rows: {lookup}'s list is part of the statement's shape: give a tuple")
    shape = (
        model,
        tuple((lookup, value if value is None or isinstance(value, tuple) else _BOUND) for lookup, value in filters.items()),
        tuple((name, isinstance(value, Increment)) for name, value in values.items()),
    )
    bound = {f"f{i}": value for i, value in enumerate(filters.values()) if value is not None and not isinstance(value, tuple)}
    for i, value in enumerate(values.values()):
        bound[f"v{i}"] = value.value if isinstance(value, Increment) else value
    return _UPDATE_ROWS.run(using=using, shape=shape, **bound)


_BOUND = object()  # a filter whose value is bound per call (not part of the shape)


def _shape_filters(shape) -> QuerySet:
    model, filters, _ = shape
    opts = model._meta
    lookups = {}
    for i, (lookup, kind) in enumerate(filters):
        if kind is None:
            lookups[f"{lookup}__isnull"] = True
        elif kind is not _BOUND:
            lookups[lookup] = kind
        else:  # a plain field name is prepared by its field (a UUID, a date); a lookup's value is bound as given
            field = opts.pk if lookup == "pk" else (opts.get_field(lookup) if "__" not in lookup else None)
            lookups[lookup] = P(f"f{i}", field)
    return model._base_manager.filter(**lookups)


def _shape_values(shape) -> dict:
    model, _, values = shape
    opts = model._meta
    out = {}
    for i, (name, added) in enumerate(values):
        field = opts.get_field(name)
        out[name] = F(name) + P(f"v{i}", field) if added else P(f"v{i}", field, save=True)
    return out


_UPDATE_ROWS = Prepared.update(_shape_filters, _shape_values)


# --------------------------------------------------------------------------- inserts

_INSERTS: dict[tuple, tuple[str, list[Field]]] = {}  # (model, alias, rows, ignore) -> the SQL and its fields


def insert(objs: list[Model], *, using: str = DEFAULT_DB_ALIAS, ignore_conflicts: bool = False) -> None:
    """``objs`` (new rows of one model) inserted in one statement (more when they hold more
    parameters than the database takes at once), its SQL kept per model, alias and row count. ``pre_save`` runs as for a save (``auto_now_add``), no signal is
    sent (as for ``bulk_create``); a single row with an auto key gets it (``lastrowid``).
    ``ignore_conflicts``: a row whose key or unique value is stored already is left out, as
    ``bulk_create(ignore_conflicts=True)`` does. Unlike ``bulk_create``, no transaction is
    opened around the statement: in autocommit it commits on its own."""
    if not objs:
        return
    model = type(objs[0])
    connection = connections[using]
    if len(objs) > 1:  # as many rows a statement as the database takes parameters (SQLite's limit)
        size = max(1, connection.ops.bulk_batch_size(model._meta.concrete_fields, objs))
        if size < len(objs):
            for start in range(0, len(objs), size):
                insert(objs[start : start + size], using=using, ignore_conflicts=ignore_conflicts)
            return
    key = (model, using, len(objs), ignore_conflicts)
    entry = _INSERTS.get(key)
    if entry is None:
        opts = model._meta
        fields = [f for f in opts.concrete_fields if not (f.primary_key and f.db_returning)]
        qn = connection.ops.quote_name
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        verb = connection.ops.insert_statement(on_conflict=OnConflict.IGNORE if ignore_conflicts else None)
        sql = f"{verb} {qn(opts.db_table)} ({', '.join(qn(f.column) for f in fields)}) VALUES {', '.join([row] * len(objs))}"
        entry = _INSERTS[key] = (sql, fields)
    sql, fields = entry
    params = [field.get_db_prep_save(field.pre_save(obj, True), connection) for obj in objs for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if len(objs) == 1 and model._meta.pk.db_returning:
            objs[0].pk = cursor.lastrowid
    for obj in objs:
        obj._state.adding, obj._state.db = False, using
