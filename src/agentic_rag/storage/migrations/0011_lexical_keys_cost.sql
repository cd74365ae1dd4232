-- What computing a chunk's keys costs: an md5 for every lexeme, about 8 us a chunk (measured
-- on 7,480 man-page chunks: 9 times reading the lexemes alone), some 1,000 times what the
-- planner assumes for an operator. With the default cost (100) a table without statistics
-- yet, as right after a first ingestion, was read row by row, every row's keys computed,
-- instead of the index being asked (tests/test_bm25.py).
ALTER FUNCTION lexical_keys(text, tsvector) COST 1000;
