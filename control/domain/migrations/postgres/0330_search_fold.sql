-- search_fold(text): the case folding of text search (store::fold), so that a search
-- finds "Zürich Öst" by "öst" whatever the database's LC_CTYPE. ICU's root-locale
-- lowercase when the server has ICU, else lower(); the final sigma folds to σ, as the
-- pattern does.
DO $migration$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu') THEN
        CREATE OR REPLACE FUNCTION search_fold(t text) RETURNS text
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS $fold$ SELECT translate(lower(t COLLATE "und-x-icu"), 'ς', 'σ') $fold$;
    ELSE
        CREATE OR REPLACE FUNCTION search_fold(t text) RETURNS text
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS $fold$ SELECT translate(lower(t), 'ς', 'σ') $fold$;
    END IF;
END
$migration$;
