"""A MariaDB source's URL names its database as the driver reads it: parameters after ``;`` or
``?`` are not part of it (the portal records tables under the same name)."""

import pytest

from portal.pipeline.cdc import mysql
from portal.pipeline.errors import ConfigError


def test_the_database_stops_where_the_parameters_begin():
    assert mysql.server_of("jdbc:mariadb://db:3307/shop;sessionVariables=a=b", "u", "p").database == "shop"
    assert mysql.server_of("jdbc:mysql://db/shop?useSSL=false", "u", "p").database == "shop"


def test_a_url_naming_no_database_is_refused():
    with pytest.raises(ConfigError, match="needs the node's database"):
        mysql.server_of("jdbc:mariadb://db:3306/", "u", "p")
