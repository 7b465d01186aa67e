-- Every change of a table an inbound route reads is announced on the channel
-- `callsmith_routes` when it commits, so each engine drops the routes it keeps in memory
-- (store::routing). One notification per statement; PostgreSQL folds equal ones of one
-- transaction into one.
CREATE OR REPLACE FUNCTION callsmith_route_changed() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('callsmith_routes', TG_TABLE_NAME);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER numbers_route_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON numbers
    FOR EACH STATEMENT EXECUTE FUNCTION callsmith_route_changed();
CREATE TRIGGER number_pools_route_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON number_pools
    FOR EACH STATEMENT EXECUTE FUNCTION callsmith_route_changed();
CREATE TRIGGER agents_route_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON agents
    FOR EACH STATEMENT EXECUTE FUNCTION callsmith_route_changed();
CREATE TRIGGER scenarios_route_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON scenarios
    FOR EACH STATEMENT EXECUTE FUNCTION callsmith_route_changed();
CREATE TRIGGER scenario_versions_route_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON scenario_versions
    FOR EACH STATEMENT EXECUTE FUNCTION callsmith_route_changed();
CREATE TRIGGER accounts_route_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION callsmith_route_changed();
CREATE TRIGGER tenants_route_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tenants
    FOR EACH STATEMENT EXECUTE FUNCTION callsmith_route_changed();
