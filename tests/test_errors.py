"""User-facing error text: what the user must act on leads the message, before any cut."""

from __future__ import annotations


def test_an_object_store_verdict_leads_the_error() -> None:
    """LanceDB's error text (this shape, from a refused S3 request) hides the store's verdict past the cut."""
    from mcp_analysis.errors import storage_error_message

    lance = (
        'Invalid input, Failed to connect to namespace: IO { source: Generic { store: "S3", source: ListRequest '
        "{ source: RetryError(RetryErrorImpl { method: GET, uri: Some(http://127.0.0.1:9000/kb?list-type=2), "
        "retries: 0, max_retries: 3, elapsed: 9.4ms, retry_timeout: 15s, inner: Status { status: 403, body: "
        'Some("<?xml version=\\"1.0\\" encoding=\\"UTF-8\\"?>\\n<Error><Code>InvalidAccessKeyId</Code><Message>'
        'The AWS Access Key Id you provided does not exist in our records.</Message></Error>") } }) } }'
    )
    refused = storage_error_message("s3://kb/docs", ValueError(lance))
    assert "refused the credentials (InvalidAccessKeyId: The AWS Access Key Id you provided" in refused
    assert "Retry" not in refused
    other = storage_error_message("s3://kb/docs", ValueError(lance.replace("InvalidAccessKeyId", "SlowDown")))
    assert "failing: SlowDown: The AWS Access Key Id" in other and "Retry shortly" in other


def test_no_credentials_at_all_is_said_and_not_retried() -> None:
    """LanceDB's text when the AWS SDK's provider chain found no credentials (nothing was sent)."""
    from mcp_analysis.errors import storage_error_message

    lance = (
        'Invalid input, Failed to connect to namespace: IO { source: Generic { store: "N/A", source: IO { source: '
        '"Failed to get AWS credentials: CredentialsNotLoaded(CredentialsNotLoaded { source: Some(\\"no providers '
        'in chain provided credentials\\") })" } } }'
    )
    said = storage_error_message("s3://kb/docs", ValueError(lance))
    assert said.startswith("The knowledge base at s3://kb/docs cannot be opened: no credentials for the object store")
    assert "AWS_ACCESS_KEY_ID" in said and "Retry" not in said
