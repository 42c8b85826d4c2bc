"""The state schemas built in Python are the ones the JVM parses from their DDL strings."""
import pytest

from windowed_operator.spark.worker.state_schemas import _PRIMITIVES, schema

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("type_name", sorted(_PRIMITIVES))
def test_a_primitive_key_schema_equals_the_jvms_parse(spark, type_name):
    from pyspark.sql.types import DataType

    built = schema(("key", type_name))
    assert not isinstance(built, str)
    assert built.json() == DataType.fromDDL(f"key {type_name}").json()


def test_several_fields_and_unknown_types(spark):
    from pyspark.sql.types import DataType

    assert schema(("domain", "string"), ("bucket", "bigint"), ("part", "int")).json() == \
        DataType.fromDDL("domain string, bucket bigint, part int").json()
    assert schema(("key", "struct<a:int,b:string>")) == "key struct<a:int,b:string>"
    assert schema(("key", "decimal(10,2)"), ("x", "int")) == "key decimal(10,2), x int"
