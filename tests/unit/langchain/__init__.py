"""``partner_repo.langchain``: the LangChain chat history and message conversions."""
