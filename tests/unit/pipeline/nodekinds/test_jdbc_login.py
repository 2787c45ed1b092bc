"""Which JDBC nodes leave the login to their flows (and so have it judged)."""

from portal.pipeline.nodekinds import jdbc


def test_a_server_node_naming_no_user_takes_the_flows_login() -> None:
    assert jdbc.takes_flow_login({"url": "jdbc:postgresql://db:5432/sales"})
    assert jdbc.takes_flow_login({"url": "jdbc:mariadb://db:3306/sales", "password": "s3cret"})


def test_a_node_with_its_own_user_keeps_it() -> None:
    assert not jdbc.takes_flow_login({"url": "jdbc:postgresql://db/sales", "user": "etl"})
    assert not jdbc.takes_flow_login({"url": "jdbc:postgresql://db/sales?user=etl"})
    assert not jdbc.takes_flow_login({"url": "jdbc:mysql://db/sales;ssl=true;user=etl"})


def test_a_url_user_the_driver_would_not_read_does_not_count() -> None:
    """pgJDBC reads `user` in lower case only, and an empty value is no user at all."""
    assert jdbc.takes_flow_login({"url": "jdbc:postgresql://db/sales?USER=etl"})
    assert jdbc.takes_flow_login({"url": "jdbc:postgresql://db/sales?user=&ssl=true"})


def test_sqlite_has_no_login_to_borrow() -> None:
    assert not jdbc.takes_flow_login({"url": "jdbc:sqlite:/data/sales.db"})
