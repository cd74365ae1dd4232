-- Boilerplate detection (knowledge/sources/boilerplate.py): which pages of a site hold which
-- blocks. A block (a paragraph, list, table or code block, normalised and hashed) found on many
-- pages of one site is its chrome (a footer, "last modified", a suite's name) and is kept out
-- of the chunks. A page's rows are replaced each time it is read.
CREATE TABLE site_blocks (
    tenant  text  NOT NULL,
    site    text  NOT NULL,
    block   bytea NOT NULL,
    uri     text  NOT NULL,
    PRIMARY KEY (tenant, site, block, uri)
);
CREATE INDEX site_blocks_page ON site_blocks (tenant, site, uri);
