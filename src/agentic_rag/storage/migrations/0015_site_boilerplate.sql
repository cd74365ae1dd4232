-- Blocks found to be boilerplate on a site (knowledge/sources/boilerplate.py): once decided, a
-- block stays boilerplate while it is on at least half of the site's pages, so that pages read
-- later without the site's template (an index reached from another start page) do not bring
-- its footer back into every page.
CREATE TABLE site_boilerplate (
    tenant  text  NOT NULL,
    site    text  NOT NULL,
    block   bytea NOT NULL,
    PRIMARY KEY (tenant, site, block)
);
