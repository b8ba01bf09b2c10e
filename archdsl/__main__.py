from archdsl.cli import program

program()
