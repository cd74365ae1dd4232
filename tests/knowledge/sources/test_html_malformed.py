"""Malformed pages read as browsers show them (issue 28, point 3): the HTML5 parsing rules.

Each page is a shape real servers send; each test asserts the stored text holds what a browser
shows of the page. bench/fidelity measures the same shapes on whole pages.
"""

from agentic_rag.knowledge.sources.html_page import read_html

MAN2HTML_WITH_CGI_HEADER = b"""Content-type: text/html

<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN">
<HTML><HEAD><TITLE>Man page of BASH</TITLE>
</HEAD><BODY>
<H1>BASH</H1>
Section: User Commands (1)<BR>Updated: 2022 September 19<BR><A HREF="#index">Index</A>
<A HREF="/cgi-bin/man/man2html">Return to Main Contents</A><HR>

<A NAME="lbAB">&nbsp;</A>
<H2>NAME</H2>

bash - GNU Bourne-Again SHell
<A NAME="lbAC">&nbsp;</A>
<H2>SYNOPSIS</H2>

<B>bash</B>
[options]
[command_string | file]
<A NAME="lbAE">&nbsp;</A>
<H2>DESCRIPTION</H2>

<B>Bash</B>

is an <B>sh</B>-compatible command language interpreter that
executes commands read from the standard input or from a file.
<A NAME="lbAF">&nbsp;</A>
<H2>OPTIONS</H2>

<DL COMPACT>
<DT><B>-c</B>

<DD>
If the
<B>-c</B>

option is present, then commands are read from the first non-option argument
<I>command_string</I>.
</DL>
<HR>
This document was created by
<A HREF="/cgi-bin/man/man2html">man2html</A>,
using the manual pages.<BR>
</BODY>
</HTML>
"""


def stored_text(page: bytes) -> str:
    sections = read_html(page, "https://man.example/cgi-bin/man/man2html?bash").document.sections
    return " ".join(" ".join(section.text for section in sections).split())


def test_a_man2html_page_behind_a_cgi_header_is_read() -> None:
    text = stored_text(MAN2HTML_WITH_CGI_HEADER)
    assert "bash - GNU Bourne-Again SHell" in text
    assert "executes commands read from the standard input or from a file." in text
    assert "then commands are read from the first non-option argument command_string." in text


def test_text_before_the_doctype_does_not_hide_the_page() -> None:
    page = b"<!-- generated -->\nstray words\n<!DOCTYPE html><html><body><main>" + (
        b"<p>The paragraph after a stray line before the doctype.</p></main></body></html>"
    )
    assert "The paragraph after a stray line before the doctype." in stored_text(page)


def test_a_page_without_html_or_body_is_read() -> None:
    page = b"<title>T</title><h1>Heading here</h1><p>A paragraph with no body element around it."
    assert "A paragraph with no body element around it." in stored_text(page)


def test_unclosed_tags_close_as_browsers_close_them() -> None:
    page = (
        b"<!DOCTYPE html><html><body><div><p>First paragraph left open<p>Second <b>bold <i>both"
        b"</b> after</i><ul><li>one item<li>two item</ul><table><tr><td>cell a<td>cell b</table>"
    )
    text = stored_text(page)
    for visible in ("First paragraph left open", "Second bold both after", "one item", "cell b"):
        assert visible in text


def test_a_byte_order_mark_is_not_text() -> None:
    page = "\ufeff<!DOCTYPE html><html><body><p>Café crème, read after a BOM.</p></body></html>"
    text = stored_text(page.encode("utf-8"))
    assert "Café crème, read after a BOM." in text
    assert "\ufeff" not in text


def test_a_wrongly_declared_charset_does_not_garble_utf8_text() -> None:
    page = "<!DOCTYPE html><html><head><meta charset=iso-8859-1></head><body>" + (
        "<p>Café crème — declared Latin-1, sent as UTF-8.</p></body></html>"
    )
    assert "Café crème — declared Latin-1, sent as UTF-8." in stored_text(page.encode("utf-8"))


def test_uppercase_tags_are_tags() -> None:
    page = b"<HTML><BODY><MAIN><H2>Upper</H2><P>Text in an UPPERCASE paragraph.</P><UL><LI>An item"
    text = stored_text(page + b"</UL></MAIN></BODY></HTML>")
    assert "Text in an UPPERCASE paragraph." in text
    assert "An item" in text


def test_xhtml_served_as_html_is_read() -> None:
    page = b"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN"
 "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>X</title></head><body>
<p>An XHTML paragraph.</p><br/><div/><p>The paragraph after a self-closed div.</p></body></html>"""
    text = stored_text(page)
    assert "An XHTML paragraph." in text
    assert "The paragraph after a self-closed div." in text
    assert "xml version" not in text


def test_text_inside_a_form_that_is_no_control_is_content() -> None:
    page = (
        b"<!DOCTYPE html><html><body><main><h1>Example</h1><form action=/run>"
        b"<p>Note: the example below runs when the form is sent.</p><pre>$ ls -la example</pre>"
        b"<label>Query</label><input name=q value=typed><button>Go</button></form></main></body>"
    )
    text = stored_text(page)
    assert "Note: the example below runs when the form is sent." in text
    assert "$ ls -la example" in text
    assert "typed" not in text and "Go" not in text
