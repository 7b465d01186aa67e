-- search_fold(text), the case folding of text search, is an application-defined function
-- that the store defines on every SQLite connection (store::fold); nothing is stored.
SELECT 1;
